package mlx_test

import (
	"strings"
	"testing"

	"github.com/mlxgo/mlxgo/internal/mlxtest"
	"github.com/mlxgo/mlxgo/mlx"
)

func TestDevicesAndStreams(t *testing.T) {
	mlxtest.Do(t, func() error {
		d, err := mlx.DefaultDevice()
		if err != nil {
			return err
		}
		if d.Type != mlx.CPU {
			t.Errorf("default device %v, want cpu on the cpu pack", d)
		}
		if err := mlx.SetDefaultDevice(mlx.Device{Type: mlx.CPU}); err != nil {
			return err
		}
		if ok, err := mlx.DeviceAvailable(mlx.GPU); err != nil || ok {
			t.Errorf("gpu available = %v, %v on the cpu pack", ok, err)
		}
		info, err := mlx.DeviceInfo(d)
		if err != nil {
			return err
		}
		if info["architecture"] == "" {
			t.Errorf("device info %v has no architecture", info)
		}
		def, err := mlx.DefaultStream(d)
		if err != nil {
			return err
		}
		s, err := mlx.NewStream(d)
		if err != nil {
			return err
		}
		if s.Index == def.Index {
			t.Errorf("new stream has the default stream's index %d", s.Index)
		}
		// Work on a new default stream computes the same, and the old
		// default comes back.
		if err := mlx.SetDefaultStream(s); err != nil {
			return err
		}
		got, err := f32(mlx.Add(arr(pv), arr(pv)))
		if err != nil {
			return err
		}
		if err := closeTo(got, []float32{1, 2, 4, 8}, 0, 0); err != nil {
			t.Errorf("add on a new stream: %v", err)
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := mlx.SetDefaultStream(def); err != nil {
			return err
		}
		if err := mlx.Synchronize(); err != nil {
			return err
		}
		// A device type the shim does not know is an error, not a crash.
		if err := mlx.SetDefaultDevice(mlx.Device{Type: 7}); err == nil || !strings.Contains(err.Error(), "unknown device") {
			t.Errorf("SetDefaultDevice(7) = %v", err)
		}
		return nil
	})
}

func TestMemory(t *testing.T) {
	mlxtest.Do(t, func() error {
		if err := mlx.ResetPeakMemory(); err != nil {
			return err
		}
		a := mlx.Zeros(mlx.Float32, 1<<20) // 4 MiB
		if err := mlx.Eval(a); err != nil {
			return err
		}
		m, err := mlx.Memory()
		if err != nil {
			return err
		}
		if m.Active < 4<<20 || m.Peak < m.Active || m.Limit == 0 {
			t.Errorf("after a 4 MiB array: %+v", m)
		}
		a.Free()
		prev, err := mlx.SetCacheLimit(0)
		if err != nil {
			return err
		}
		again, err := mlx.SetCacheLimit(prev)
		if err != nil {
			return err
		}
		if again != 0 {
			t.Errorf("SetCacheLimit returned %d as the previous limit, want 0", again)
		}
		lim, err := mlx.SetMemoryLimit(m.Limit)
		if err != nil || lim != m.Limit {
			t.Errorf("SetMemoryLimit: previous %d, %v; want %d", lim, err, m.Limit)
		}
		if _, err := mlx.SetWiredLimit(0); err != nil {
			return err
		}
		if err := mlx.ClearCache(); err != nil {
			return err
		}
		after, err := mlx.Memory()
		if err != nil {
			return err
		}
		if after.Cache != 0 {
			t.Errorf("cache is %d bytes after ClearCache", after.Cache)
		}
		return nil
	})
}
