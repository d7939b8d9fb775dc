package silero

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The ONNX protobuf, read by hand: only the messages and fields the Silero
// graph uses (ModelProto.graph, GraphProto, NodeProto, AttributeProto,
// TensorProto), every length checked against what is left, so that a
// damaged file is an error, never a panic or a huge allocation.

// Graph is an ONNX GraphProto: nodes in topological order, initializers by
// name, and the names of its inputs and outputs.
type Graph struct {
	Name    string
	Nodes   []*Node
	Inits   map[string]*Tensor
	Inputs  []string
	Outputs []string
}

// Node is a NodeProto.
type Node struct {
	Name, Op, Domain string
	Inputs, Outputs  []string
	Attrs            map[string]*Attr
}

// Attr is an AttributeProto: one of its value fields is set.
type Attr struct {
	F      float32
	I      int64
	S      []byte
	T      *Tensor
	G      *Graph
	Floats []float32
	Ints   []int64
}

// Tensor is a TensorProto's dims and values: float32 data as F, integer
// and boolean data as I (int64).
type Tensor struct {
	Name  string
	Dims  []int64
	Dtype int32 // ONNX TensorProto.DataType
	F     []float32
	I     []int64
}

// ONNX data types the reader converts.
const (
	dtFloat  = 1
	dtUint8  = 2
	dtInt8   = 3
	dtInt32  = 6
	dtInt64  = 7
	dtBool   = 9
	dtDouble = 11
)

// maxDepth bounds subgraph nesting (If branches hold graphs).
const maxDepth = 8

var errTruncated = errors.New("truncated protobuf")

// pb is a protobuf reader over one message's bytes.
type pb struct{ b []byte }

func (p *pb) varint() (uint64, error) {
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		return 0, errTruncated
	}
	p.b = p.b[n:]
	return v, nil
}

// field reads the next field: its number, wire type, and either its
// varint/fixed value or its length-delimited bytes.
func (p *pb) field() (num int, wire int, v uint64, data []byte, err error) {
	key, err := p.varint()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	num, wire = int(key>>3), int(key&7)
	if num == 0 {
		return 0, 0, 0, nil, errors.New("protobuf field number 0")
	}
	switch wire {
	case 0:
		v, err = p.varint()
	case 1:
		if len(p.b) < 8 {
			return 0, 0, 0, nil, errTruncated
		}
		v, p.b = binary.LittleEndian.Uint64(p.b), p.b[8:]
	case 5:
		if len(p.b) < 4 {
			return 0, 0, 0, nil, errTruncated
		}
		v, p.b = uint64(binary.LittleEndian.Uint32(p.b)), p.b[4:]
	case 2:
		var n uint64
		if n, err = p.varint(); err != nil {
			return
		}
		if n > uint64(len(p.b)) {
			return 0, 0, 0, nil, errTruncated
		}
		data, p.b = p.b[:n], p.b[n:]
	default:
		return 0, 0, 0, nil, fmt.Errorf("protobuf wire type %d is not supported", wire)
	}
	return
}

// ParseModel reads an ONNX ModelProto and returns its graph.
func ParseModel(b []byte) (*Graph, error) {
	p := &pb{b}
	var g *Graph
	for len(p.b) > 0 {
		num, wire, _, data, err := p.field()
		if err != nil {
			return nil, fmt.Errorf("onnx model: %w", err)
		}
		if num == 7 && wire == 2 {
			if g, err = parseGraph(data, 0); err != nil {
				return nil, fmt.Errorf("onnx graph: %w", err)
			}
		}
	}
	if g == nil {
		return nil, errors.New("onnx model: no graph")
	}
	return g, nil
}

func parseGraph(b []byte, depth int) (*Graph, error) {
	if depth > maxDepth {
		return nil, errors.New("subgraphs nested too deep")
	}
	g := &Graph{Inits: map[string]*Tensor{}}
	p := &pb{b}
	for len(p.b) > 0 {
		num, wire, _, data, err := p.field()
		if err != nil {
			return nil, err
		}
		if wire != 2 {
			continue
		}
		switch num {
		case 1:
			n, err := parseNode(data, depth)
			if err != nil {
				return nil, err
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name = string(data)
		case 5:
			t, err := parseTensor(data)
			if err != nil {
				return nil, fmt.Errorf("initializer: %w", err)
			}
			g.Inits[t.Name] = t
		case 11, 12:
			name, err := valueInfoName(data)
			if err != nil {
				return nil, err
			}
			if num == 11 {
				g.Inputs = append(g.Inputs, name)
			} else {
				g.Outputs = append(g.Outputs, name)
			}
		}
	}
	return g, nil
}

func valueInfoName(b []byte) (string, error) {
	p := &pb{b}
	for len(p.b) > 0 {
		num, wire, _, data, err := p.field()
		if err != nil {
			return "", err
		}
		if num == 1 && wire == 2 {
			return string(data), nil
		}
	}
	return "", errors.New("value info without a name")
}

func parseNode(b []byte, depth int) (*Node, error) {
	n := &Node{Attrs: map[string]*Attr{}}
	p := &pb{b}
	for len(p.b) > 0 {
		num, wire, _, data, err := p.field()
		if err != nil {
			return nil, err
		}
		if wire != 2 {
			continue
		}
		switch num {
		case 1:
			n.Inputs = append(n.Inputs, string(data))
		case 2:
			n.Outputs = append(n.Outputs, string(data))
		case 3:
			n.Name = string(data)
		case 4:
			n.Op = string(data)
		case 7:
			n.Domain = string(data)
		case 5:
			name, a, err := parseAttr(data, depth)
			if err != nil {
				return nil, fmt.Errorf("node %s attribute: %w", n.Name, err)
			}
			n.Attrs[name] = a
		}
	}
	if n.Op == "" {
		return nil, fmt.Errorf("node %q has no op_type", n.Name)
	}
	return n, nil
}

func parseAttr(b []byte, depth int) (string, *Attr, error) {
	a := &Attr{}
	var name string
	p := &pb{b}
	for len(p.b) > 0 {
		num, wire, v, data, err := p.field()
		if err != nil {
			return "", nil, err
		}
		switch {
		case num == 1 && wire == 2:
			name = string(data)
		case num == 2 && wire == 5:
			a.F = math.Float32frombits(uint32(v))
		case num == 3 && wire == 0:
			a.I = int64(v)
		case num == 4 && wire == 2:
			a.S = data
		case num == 5 && wire == 2:
			if a.T, err = parseTensor(data); err != nil {
				return "", nil, err
			}
		case num == 6 && wire == 2:
			if a.G, err = parseGraph(data, depth+1); err != nil {
				return "", nil, err
			}
		case num == 7:
			fs, err := floats(wire, v, data)
			if err != nil {
				return "", nil, err
			}
			a.Floats = append(a.Floats, fs...)
		case num == 8:
			is, err := ints(wire, v, data)
			if err != nil {
				return "", nil, err
			}
			a.Ints = append(a.Ints, is...)
		}
	}
	return name, a, nil
}

// floats reads a repeated float field: packed bytes or one fixed32 value.
func floats(wire int, v uint64, data []byte) ([]float32, error) {
	switch wire {
	case 5:
		return []float32{math.Float32frombits(uint32(v))}, nil
	case 2:
		if len(data)%4 != 0 {
			return nil, errors.New("packed floats not a multiple of 4 bytes")
		}
		out := make([]float32, len(data)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("repeated float with wire type %d", wire)
}

// ints reads a repeated varint field: packed or one value.
func ints(wire int, v uint64, data []byte) ([]int64, error) {
	switch wire {
	case 0:
		return []int64{int64(v)}, nil
	case 2:
		var out []int64
		q := &pb{data}
		for len(q.b) > 0 {
			x, err := q.varint()
			if err != nil {
				return nil, err
			}
			out = append(out, int64(x))
		}
		return out, nil
	}
	return nil, fmt.Errorf("repeated int with wire type %d", wire)
}

// maxElements bounds one tensor (Silero's largest holds 66k values).
const maxElements = 1 << 26

func parseTensor(b []byte) (*Tensor, error) {
	t := &Tensor{}
	var raw []byte
	hasRaw := false
	p := &pb{b}
	for len(p.b) > 0 {
		num, wire, v, data, err := p.field()
		if err != nil {
			return nil, err
		}
		switch {
		case num == 1:
			ds, err := ints(wire, v, data)
			if err != nil {
				return nil, err
			}
			t.Dims = append(t.Dims, ds...)
		case num == 2 && wire == 0:
			t.Dtype = int32(v)
		case num == 4:
			fs, err := floats(wire, v, data)
			if err != nil {
				return nil, err
			}
			t.F = append(t.F, fs...)
		case num == 5 || num == 7:
			is, err := ints(wire, v, data)
			if err != nil {
				return nil, err
			}
			t.I = append(t.I, is...)
		case num == 8 && wire == 2:
			t.Name = string(data)
		case num == 9 && wire == 2:
			raw, hasRaw = data, true
		case num == 13 || num == 14 && v == 1:
			return nil, fmt.Errorf("tensor %q: external data is not supported", t.Name)
		}
	}
	n := int64(1)
	for _, d := range t.Dims {
		if d < 0 || d > maxElements || n*max(d, 1) > maxElements {
			return nil, fmt.Errorf("tensor %q: dims %v out of range", t.Name, t.Dims)
		}
		n *= d
	}
	if hasRaw {
		if err := t.fromRaw(raw); err != nil {
			return nil, err
		}
	}
	switch t.Dtype {
	case dtFloat, dtDouble:
		if int64(len(t.F)) != n {
			return nil, fmt.Errorf("tensor %q: %d values for dims %v", t.Name, len(t.F), t.Dims)
		}
	case dtInt64, dtInt32, dtInt8, dtUint8, dtBool:
		if int64(len(t.I)) != n {
			return nil, fmt.Errorf("tensor %q: %d values for dims %v", t.Name, len(t.I), t.Dims)
		}
	default:
		return nil, fmt.Errorf("tensor %q: data type %d is not supported", t.Name, t.Dtype)
	}
	return t, nil
}

func (t *Tensor) fromRaw(raw []byte) error {
	size := map[int32]int{dtFloat: 4, dtDouble: 8, dtInt64: 8, dtInt32: 4, dtInt8: 1, dtUint8: 1, dtBool: 1}[t.Dtype]
	if size == 0 {
		return fmt.Errorf("tensor %q: data type %d is not supported", t.Name, t.Dtype)
	}
	if len(raw)%size != 0 || len(raw)/size > maxElements {
		return fmt.Errorf("tensor %q: raw data of %d bytes", t.Name, len(raw))
	}
	n := len(raw) / size
	switch t.Dtype {
	case dtFloat:
		t.F = make([]float32, n)
		for i := range t.F {
			t.F[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case dtDouble:
		t.F = make([]float32, n)
		for i := range t.F {
			t.F[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:])))
		}
	default:
		t.I = make([]int64, n)
		for i := range t.I {
			switch t.Dtype {
			case dtInt64:
				t.I[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			case dtInt32:
				t.I[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			case dtInt8:
				t.I[i] = int64(int8(raw[i]))
			default:
				t.I[i] = int64(raw[i])
			}
		}
	}
	return nil
}
