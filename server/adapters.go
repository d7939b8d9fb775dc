package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mlxgo/mlxgo/kv"
	"github.com/mlxgo/mlxgo/models"
)

// LoRA adapters chosen per request (README, "LoRA adapters"). The model is
// loaded once with every adapter of serve's --adapter flags; a request
// names one by mlx_lm.server's "adapters" field or by the model id
// "ID:NAME" that GET /v1/models lists for it, and runs as a row of the one
// batch like any other: the row's caches carry its adapter (models.Adapted),
// so rows of different adapters (and rows of none) decode together, each
// bit-identical to its run alone. The prompt cache keeps each adapter's KV
// apart.

// Adapter is a LoRA adapter the served model was loaded with.
type Adapter struct {
	Name  string
	Path  string // the directory it was loaded from
	Type  string // "lora" or "dora"
	Fused bool   // folded into the weights: every request runs it
	// Fingerprint is the adapter's artifact fingerprint.
	Fingerprint func() (string, error)
}

// adaptersOf is what the model says of its adapters.
func adaptersOf(info models.Info) []Adapter {
	var out []Adapter
	for _, a := range info.Adapters {
		out = append(out, Adapter{Name: a.Name, Path: a.Path, Type: a.Type, Fused: a.Fused, Fingerprint: a.Fingerprint})
	}
	return out
}

// adapterKey carries a completion execution's adapter name from the
// handler to the runner, with the execution's context (Runner.Add).
type adapterKey struct{}

func withAdapter(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, adapterKey{}, name)
}

func adapterFrom(ctx context.Context) string {
	name, _ := ctx.Value(adapterKey{}).(string)
	return name
}

// decodeAdapterField reads mlx_lm.server's "adapters" field, a string
// (there: an adapter path to load; here: a loaded adapter's name or the
// directory it was loaded from). "" and mlx_lm.server's "default_model"
// ask for none.
func decodeAdapterField(body []byte) (string, error) {
	var b struct {
		Adapters json.RawMessage `json:"adapters"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Adapters) == 0 || string(bytes.TrimSpace(b.Adapters)) == "null" {
		return "", nil // the typed decode reports a syntax error
	}
	var s string
	if err := json.Unmarshal(b.Adapters, &s); err != nil {
		return "", invalidf("adapters", "adapters must be a string: the name of a loaded adapter")
	}
	if s == "default_model" {
		s = ""
	}
	return s, nil
}

// adapterFor resolves which adapter a request runs: the model id
// "ID:NAME", or the adapters field (one name, or the directory given to
// --adapter). An unknown name is a 404 naming the loaded adapters; both
// ways naming different adapters is a 400. With a fused adapter, the only
// one, nothing is chosen per request ("" back).
func (s *Server) adapterFor(p *params) (string, error) {
	ads := s.cfg.Model.Adapters
	var byModel string
	if base, name, ok := strings.Cut(p.model, ":"); ok && base == s.cfg.Model.ID {
		if name == "" || !slices.ContainsFunc(ads, func(a Adapter) bool { return a.Name == name }) {
			return "", &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
				message: fmt.Sprintf("the model %q does not exist: %s", p.model, s.loadedAdapters())}
		}
		byModel = name
	}
	byField := ""
	if p.adapter != "" {
		i := slices.IndexFunc(ads, func(a Adapter) bool { return a.Name == p.adapter || a.Path == p.adapter })
		if i < 0 {
			return "", &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "adapters", code: "adapter_not_found",
				message: fmt.Sprintf("there is no adapter %q: %s", p.adapter, s.loadedAdapters())}
		}
		byField = ads[i].Name
	}
	if byModel != "" && byField != "" && byModel != byField {
		return "", invalidf("adapters", "the model %q and adapters %q name different adapters", p.model, p.adapter)
	}
	name := byModel
	if name == "" {
		name = byField
	}
	if len(ads) > 0 && ads[0].Fused {
		return "", nil
	}
	return name, nil
}

// useAdapter records a request's adapter: the model its responses name
// and its request features.
func (s *Server) useAdapter(rs *response, name string) {
	if name == "" {
		if ads := s.cfg.Model.Adapters; len(ads) > 0 && ads[0].Fused {
			rs.features = strings.TrimSpace(rs.features + " adapter=" + ads[0].Name + "(fused)")
		}
		return
	}
	rs.model = s.cfg.Model.ID + ":" + name
	rs.features = strings.TrimSpace(rs.features + " adapter=" + name)
}

// loadedAdapters says which adapters requests may name.
func (s *Server) loadedAdapters() string {
	ads := s.cfg.Model.Adapters
	if len(ads) == 0 {
		return fmt.Sprintf("%q was loaded without LoRA adapters (serve --adapter NAME=DIR)", s.cfg.Model.ID)
	}
	var names []string
	for _, a := range ads {
		names = append(names, fmt.Sprintf("%q (model %q)", a.Name, s.cfg.Model.ID+":"+a.Name))
	}
	return "the adapters loaded are " + strings.Join(names, ", ")
}

// adapterEntries are /v1/models' entries of the adapters: "ID:NAME", with
// the base model and the adapter's own fingerprint.
func (s *Server) adapterEntries() []map[string]any {
	var out []map[string]any
	for _, a := range s.cfg.Model.Adapters {
		fp := ""
		if a.Fingerprint != nil {
			fp, _ = a.Fingerprint()
		}
		out = append(out, map[string]any{
			"id": s.cfg.Model.ID + ":" + a.Name, "object": "model", "created": s.created, "owned_by": "mlxgo",
			"parent": s.cfg.Model.ID,
			"x_mlxgo": map[string]any{"adapter": a.Name, "adapter_type": a.Type, "fused": a.Fused,
				"adapter_fingerprint": fp, "context_length": s.cfg.Model.ContextLength},
		})
	}
	return out
}

// adapterCaches are fresh caches for a row of adapter name: made by the
// adapter's view of the model, so that they carry it.
func (r *MLXRunner) adapterCaches(name string) ([]kv.Cache, error) {
	a, ok := r.Model.(models.Adapted)
	if !ok {
		return nil, fmt.Errorf("cannot run adapter %s: the model was loaded without adapters", name)
	}
	v, err := a.WithAdapter(name)
	if err != nil {
		return nil, err
	}
	return v.NewCaches(r.KV), nil
}

// layerCaches are the layers' caches m makes with o, without an adapted
// model's adapter entry (for what counts layers: kv_scheme, kv_config.json).
func layerCaches(m models.Model, o kv.Options) []kv.Cache {
	_, caches := models.AdapterOf(m, m.NewCaches(o))
	return caches
}
