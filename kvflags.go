package main

import (
	"flag"

	"github.com/mlxgo/mlxgo/kv"
)

// kvFlags are the KV cache flags generate and serve share, spelled as
// mlx_lm.generate spells them.
type kvFlags struct {
	bits, group, start, maxKV int
	bitsSet                   bool // --kv-bits was given (serve: it overrides kv_config.json)
}

const kvUsage = `	--kv-bits 4|8             quantize the KV cache from --quantized-kv-start
	--kv-group-size N         KV quantization group size (default 64)
	--quantized-kv-start N    cache length at which --kv-bits starts (default 5000)
	--max-kv-size N           keep at most N tokens of KV (rotating, keeps 4)
`

func (k *kvFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&k.bits, "kv-bits", 0, "")
	fs.IntVar(&k.group, "kv-group-size", kv.DefaultKVGroupSize, "")
	fs.IntVar(&k.start, "quantized-kv-start", kv.DefaultQuantizedKVStart, "")
	fs.IntVar(&k.maxKV, "max-kv-size", 0, "")
}

// check validates the flags once fs is parsed.
func (k *kvFlags) check(fs *flag.FlagSet) error {
	fs.Visit(func(fl *flag.Flag) { k.bitsSet = k.bitsSet || fl.Name == "kv-bits" })
	switch {
	case k.bits != 0 && k.bits != 4 && k.bits != 8:
		return usagef("--kv-bits must be 4 or 8")
	case k.group <= 0 || k.start < 0 || k.maxKV < 0:
		return usagef("--kv-group-size must be positive; --quantized-kv-start and --max-kv-size must not be negative")
	case k.bits != 0 && k.maxKV > 0:
		return usagef("--kv-bits cannot be combined with --max-kv-size (a rotating cache cannot be quantized)")
	}
	return nil
}

// options are the caches the flags ask for.
func (k *kvFlags) options() kv.Options {
	return kv.Options{MaxKVSize: k.maxKV, KVBits: k.bits, KVGroupSize: k.group}
}
