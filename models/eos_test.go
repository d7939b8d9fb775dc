package models

import (
	"slices"
	"testing"
)

func TestInfoEOSIDs(t *testing.T) {
	tests := []struct {
		name   string
		config []int
		extra  []int32
		want   []int32
	}{
		{"none", nil, nil, nil},
		{"config only", []int{2}, nil, []int32{2}},
		{"tokenizer only", nil, []int32{7}, []int32{7}},
		{"both, distinct", []int{128001, 128008}, []int32{128009}, []int32{128001, 128008, 128009}},
		{"both, same id once", []int{2}, []int32{2}, []int32{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Info{EOS: tc.config}.EOSIDs(tc.extra...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("EOSIDs = %v, want %v", got, tc.want)
			}
		})
	}
}
