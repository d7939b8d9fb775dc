package jinja

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlxgo/mlxgo/internal/testenv"
)

// oracleCase is one template rendered by both engines.
type oracleCase struct {
	name     string
	template string
	vars     string // JSON object, "" for none
}

type oracleResult struct {
	Out   *string `json:"out"`
	Error string  `json:"error"`
}

// runOracle renders cases with jinja2 as transformers configures it
// (testdata/render.py in the pinned venv).
func runOracle(t *testing.T, cases []oracleCase) []oracleResult {
	t.Helper()
	py := testenv.Python(t)
	type in struct {
		Name     string          `json:"name"`
		Template string          `json:"template"`
		Vars     json.RawMessage `json:"vars,omitempty"`
	}
	ins := make([]in, len(cases))
	for i, c := range cases {
		ins[i] = in{Name: c.name, Template: c.template}
		if c.vars != "" {
			ins[i].Vars = json.RawMessage(c.vars)
		}
	}
	data, err := json.Marshal(ins)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "render.py"))
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle failed: %v\n%s", err, stderr.String())
	}
	var res []oracleResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("cannot read oracle output: %v", err)
	}
	if len(res) != len(cases) {
		t.Fatalf("oracle returned %d results for %d cases", len(res), len(cases))
	}
	return res
}

// renderGo renders a case with this package, vars decoded as Python would.
func renderGo(c oracleCase) (string, error) {
	tmpl, err := Parse(c.template)
	if err != nil {
		return "", err
	}
	vars := map[string]any{}
	if c.vars != "" {
		v, err := DecodeJSON([]byte(c.vars))
		if err != nil {
			return "", err
		}
		d := v.(*Dict)
		for i, k := range d.Keys() {
			vars[k.(string)] = d.Values()[i]
		}
	}
	return tmpl.Render(vars)
}

// checkAgainstOracle asserts byte-identical output, or that both fail.
func checkAgainstOracle(t *testing.T, cases []oracleCase) {
	t.Helper()
	want := runOracle(t, cases)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := renderGo(c)
			w := want[i]
			switch {
			case w.Out == nil && err == nil:
				t.Errorf("template %q: jinja2 failed with %q, Go rendered %q", c.template, w.Error, got)
			case w.Out != nil && err != nil:
				t.Errorf("template %q: jinja2 rendered %q, Go failed: %v", c.template, *w.Out, err)
			case w.Out != nil && got != *w.Out:
				t.Errorf("template %q:\n got %q\nwant %q", c.template, got, *w.Out)
			}
		})
	}
}
