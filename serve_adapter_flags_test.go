package main

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/models"
)

// TestServeAdapterFlags: --adapter NAME=DIR and --adapter-path DIR (named
// by its base name) are repeatable and keep their order; bad names, a
// name twice, a value without NAME= and --fuse-adapter of other than one
// adapter are usage errors before anything loads.
func TestServeAdapterFlags(t *testing.T) {
	c := &serveCommand{m: &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}}
	f, err := c.parse([]string{"--adapter", "chat=/a/chat-lora", "--adapter-path", "/b/sql/", "--batch", "4"})
	if err != nil {
		t.Fatal(err)
	}
	want := []models.Adapter{{Name: "chat", Path: "/a/chat-lora"}, {Name: "sql", Path: "/b/sql/"}}
	if o := f.adapters.options(); !reflect.DeepEqual(o.Adapters, want) || o.FuseAdapter {
		t.Errorf("options %+v, want %+v unfused", o, want)
	}
	if f, err = c.parse([]string{"--adapter", "x=/d", "--fuse-adapter"}); err != nil || !f.adapters.options().FuseAdapter {
		t.Errorf("--fuse-adapter of one: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--adapter", "/no/name"}, "want NAME=DIR"},
		{[]string{"--adapter", "a:b=/d"}, `adapter name "a:b"`},
		{[]string{"--adapter", "a=/d", "--adapter", "a=/e"}, "two adapters are named a"},
		{[]string{"--adapter-path", "/x/a", "--adapter-path", "/y/a"}, "two adapters are named a"},
		{[]string{"--adapter", "a="}, "the adapter directory is empty"},
		{[]string{"--fuse-adapter"}, "--fuse-adapter fuses one adapter; 0 given"},
		{[]string{"--adapter", "a=/d", "--adapter", "b=/e", "--fuse-adapter"}, "--fuse-adapter fuses one adapter; 2 given"},
	} {
		if _, err := c.parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
