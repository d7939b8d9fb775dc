package mlx_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

// TestManyGoroutines sends 32×50 jobs from 32 goroutines; each computes a
// sum only it knows the answer to, so crossed results would show.
func TestManyGoroutines(t *testing.T) {
	mlxtest.Need(t)
	const goroutines, jobs = 32, 50
	before := mlx.LiveArrays()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*jobs)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < jobs; j++ {
				n := g*jobs + j + 1
				var got float64
				err := mlx.Do(func() error {
					s := mlx.NewScope()
					defer s.Close()
					var err error
					got, err = mlx.Sum(mlx.Arange(0, float64(n), 1, mlx.Float32), nil, false).Item()
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				if want := float64(n*(n-1)) / 2; got != want {
					errs <- errors.New("sum of arange(" + itoa(n) + ") = " + ftoa(float32(got)) + ", want " + ftoa(float32(want)))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := mlx.LiveArrays(); got != before {
		t.Errorf("live arrays %d after the jobs, want %d", got, before)
	}
}

func TestNestedDoRunsInline(t *testing.T) {
	mlxtest.Need(t)
	done := make(chan error, 1)
	go func() {
		done <- mlx.Do(func() error {
			return mlx.Do(func() error {
				a := arr(sv)
				defer a.Free()
				return a.Err()
			})
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nested Do deadlocked")
	}
}

func TestPanicInDoReachesCaller(t *testing.T) {
	mlxtest.Need(t)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		_ = mlx.Do(func() error { panic("boom") })
	}()
	// The executor survived the panic.
	mlxtest.Do(t, func() error { return arr(sv).Err() })
}
