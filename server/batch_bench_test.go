package server

import (
	"context"
	"testing"

	"github.com/mlxgo/mlxgo/gen"
)

// BenchmarkEngineStep measures what the continuous engine itself costs per
// step of 8 rows (admission bookkeeping, token to text, stop matching,
// event delivery and metrics) over a runner that costs nothing:
//
//	go test ./server/ -run '^$' -bench EngineStep
func BenchmarkEngineStep(b *testing.B) {
	ids, err := testTokenizer(b).Encode(scriptText, false)
	if err != nil {
		b.Fatal(err)
	}
	script := make([]int32, 0, b.N+len(ids))
	for len(script) < b.N {
		script = append(script, ids...)
	}
	const rows = 8
	fake := &fakeBatch{script: script[:b.N], max: rows}
	m := newMetrics()
	e := newEngine(fake, rows, m)
	var jobs []*job
	for i := range rows {
		j := &job{
			ctx: context.Background(), prompt: []int32{int32(i)}, text: gen.NewTextStream(testTokenizer(b).NewDetokenizer(true), gen.NewStopMatcher([]string{"never in the script"})),
			events: make(chan event, 64), m: m,
		}
		jobs = append(jobs, j)
		if err := e.submit(j); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	go e.run()
	// Every client reads as it comes, as streaming handlers do.
	errs := make(chan error, rows)
	for _, j := range jobs {
		go func() { _, ev := collect(j); errs <- ev.err }()
	}
	for range rows {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	e.close()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/step")
}
