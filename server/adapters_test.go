package server

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeAdapterField: any body gives a name or a 400 naming adapters,
// never a panic; a name comes only from a JSON string.
func FuzzDecodeAdapterField(f *testing.F) {
	for _, s := range []string{`{"adapters":"chat"}`, `{"adapters":"default_model"}`, `{"adapters":null}`,
		`{"adapters":7}`, `{"adapters":["a"]}`, `{"prompt":"x"}`, `{"adapters":"\u00e9\ud800"}`, `[`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		name, err := decodeAdapterField(body)
		if err != nil {
			if ae, ok := err.(*apiError); !ok || ae.param != "adapters" || ae.status != 400 {
				t.Fatalf("%q: error %v is not a 400 naming adapters", body, err)
			}
			return
		}
		if name == "" {
			return
		}
		var b struct{ Adapters *string }
		if json.Unmarshal(body, &b) != nil || b.Adapters == nil || *b.Adapters != name {
			t.Fatalf("%q: name %q not from the adapters string", body, name)
		}
	})
}
