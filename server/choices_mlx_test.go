package server

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestBatchNChoicesMatchesSerial: n = 3 seeded choices on --batch 4 are
// three rows of one batch, and choice i is exactly what a single request
// with seed+i gives on the serial engine; on the serial engine the same
// request runs its choices one after another with the same texts.
func TestBatchNChoicesMatchesSerial(t *testing.T) {
	m, tk := smollm2(t)
	serial, _ := startServer(t, Config{Model: NewMLXModel(m, tk, "smollm2", "test", 0)})
	bm, err := WithBatch(NewMLXModel(m, tk, "smollm2", "test", 0), 4)
	if err != nil {
		t.Fatal(err)
	}
	batched, _ := startServer(t, Config{Model: bm})
	const req = `"prompt":"Tell me a story about","max_tokens":5,"temperature":0.9,"top_p":0.95`
	want := make([]string, 3)
	for i := range want {
		status, _, b := post(t, serial+"/v1/completions", fmt.Sprintf(`{%s,"seed":%d}`, req, 7+i))
		if status != 200 {
			t.Fatalf("serial: %d %s", status, b)
		}
		want[i], _ = completionText(t, b, false)
	}
	for name, url := range map[string]string{"batched": batched, "serial": serial} {
		t.Run(name, func(t *testing.T) {
			status, _, b := post(t, url+"/v1/completions", fmt.Sprintf(`{%s,"seed":7,"n":3}`, req))
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			var r choicesReply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Choices) != 3 {
				t.Fatalf("%d choices: %s", len(r.Choices), b)
			}
			for i, c := range r.Choices {
				if c.Index != i || c.Text != want[i] || c.Text == "" {
					t.Errorf("choice %d: %q, want the seed %d text %q", i, c.Text, 7+i, want[i])
				}
			}
			if name == "batched" && (r.X.Scheduling != SchedulingContinuous || r.X.BatchRows < 2) {
				t.Errorf("x_mlxgo %+v: want the choices as rows of one batch", r.X)
			}
		})
	}
}
