package server

import (
	"errors"
	"testing"
)

// FuzzDecodeDraftFields: any body gives either a draft request within
// bounds or an invalid_request error naming the field, never a panic.
func FuzzDecodeDraftFields(f *testing.F) {
	for _, s := range []string{`{}`, `{"draft_model":"d","num_draft_tokens":3}`, `{"num_draft_tokens":-1}`,
		`{"num_draft_tokens":1e9}`, `{"draft_model":null}`, `{"draft_model":["x"]}`, `not json`, `{"num_draft_tokens":2.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeDraftFields(data)
		if err != nil {
			var e *apiError
			if !errors.As(err, &e) || (e.param != "draft_model" && e.param != "num_draft_tokens") {
				t.Fatalf("%q: %v, want an error naming a draft field", data, err)
			}
			return
		}
		if d.num != nil && (*d.num < 0 || *d.num > maxDraftTokens) {
			t.Fatalf("%q: num_draft_tokens %d out of bounds", data, *d.num)
		}
	})
}
