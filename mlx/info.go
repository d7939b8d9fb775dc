package mlx

// DeviceStatus describes one device type as MLX sees it.
type DeviceStatus struct {
	Type      string            `json:"type"`
	Available bool              `json:"available"`
	Count     int               `json:"count"`
	Info      map[string]string `json:"info,omitempty"` // of device 0, when available
}

// RuntimeInfo is what verify-native prints about the loaded MLX.
type RuntimeInfo struct {
	Version       string         `json:"mlx_version"`
	DefaultDevice string         `json:"default_device"`
	Devices       []DeviceStatus `json:"devices"`
	Metal         bool           `json:"metal"`
	CUDA          bool           `json:"cuda"`
	Memory        MemoryStats    `json:"memory"`
}

// Info gathers RuntimeInfo on the executor.
func Info() (RuntimeInfo, error) {
	var ri RuntimeInfo
	err := Do(func() error {
		ri.Version = Version()
		d, err := DefaultDevice()
		if err != nil {
			return err
		}
		ri.DefaultDevice = d.String()
		for _, t := range []DeviceType{CPU, GPU} {
			ds := DeviceStatus{Type: t.String()}
			if ds.Available, err = DeviceAvailable(t); err != nil {
				return err
			}
			if ds.Available {
				if ds.Count, err = DeviceCount(t); err != nil {
					return err
				}
				if ds.Info, err = DeviceInfo(Device{Type: t}); err != nil {
					return err
				}
			}
			ri.Devices = append(ri.Devices, ds)
		}
		if ri.Metal, ri.CUDA, err = Backends(); err != nil {
			return err
		}
		ri.Memory, err = Memory()
		return err
	})
	return ri, err
}
