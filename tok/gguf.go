package tok

import "fmt"

// LoadGGUF builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata.
func LoadGGUF(path string) (*Tokenizer, error) {
	return nil, fmt.Errorf("cannot load tokenizer from %s: gguf not implemented yet", path)
}
