package audio

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
)

// readNPZ reads the little-endian float32 arrays of a NumPy .npz file (a zip
// of .npy files), keyed by name without ".npy".
func readNPZ(path string) (map[string][]float32, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	out := map[string][]float32{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, err
		}
		if len(b) < 10 || string(b[1:6]) != "NUMPY" {
			return nil, fmt.Errorf("%s: not an .npy file", f.Name)
		}
		var hl, off int
		if b[6] == 1 {
			hl, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
		} else {
			hl, off = int(binary.LittleEndian.Uint32(b[8:12])), 12
		}
		hdr := string(b[off : off+hl])
		if !strings.Contains(hdr, "'<f4'") || strings.Contains(hdr, "'fortran_order': True") {
			return nil, fmt.Errorf("%s: header %s: want C-order <f4", f.Name, hdr)
		}
		data := b[off+hl:]
		v := make([]float32, len(data)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		out[strings.TrimSuffix(f.Name, ".npy")] = v
	}
	return out, nil
}
