package hub

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseRef: an accepted reference maps to one directory inside the
// cache and to a ref path inside its refs/, and parsing never panics.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"org/name", "org/name@main", "org/name@refs/pr/1", "a/b@0123456789abcdef0123456789abcdef01234567",
		"org/name@", "org/name@../x", "org/a--b", "../x", "org/name/extra", "@x", "org/name@a@b", "o/n@a//b", "-a/b", "a./b"} {
		f.Add(s)
	}
	cache := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		repo, rev, err := ParseRef(s)
		if err != nil {
			return
		}
		dir := Cache{Dir: cache}.RepoDir(repo)
		if rel, err := filepath.Rel(cache, dir); err != nil || strings.Contains(rel, string(filepath.Separator)) || rel == ".." || rel == "." {
			t.Fatalf("%q: repo dir %s is not one entry of the cache", s, dir)
		}
		refs := filepath.Join(dir, "refs")
		if rel, err := filepath.Rel(refs, filepath.Join(refs, filepath.FromSlash(rev))); err != nil || outside(rel) {
			t.Fatalf("%q: ref %q leaves refs/", s, rev)
		}
		if strings.Contains(repo, "@") || repo+"@"+rev != s && repo != s {
			t.Fatalf("%q parsed as %q @ %q", s, repo, rev)
		}
	})
}

// outside: a relative path that is the directory itself or above it.
func outside(rel string) bool {
	return rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// FuzzParseRepoInfo: an accepted listing has a commit hash and file names
// that stay inside a snapshot directory.
func FuzzParseRepoInfo(f *testing.F) {
	f.Add([]byte(`{"id":"o/n","sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"config.json","size":2,"blobId":"0123456789abcdef0123456789abcdef01234567"},{"rfilename":"m.safetensors","size":9,"lfs":{"sha256":"` + strings.Repeat("ab", 32) + `","size":9,"pointerSize":134}}]}`))
	f.Add([]byte(`{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"../x"}]}`))
	f.Add([]byte(`{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"a"},{"rfilename":"a"}]}`))
	f.Add([]byte(`{"sha":"main"}`))
	f.Add([]byte(`{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"a","size":-1}]}`))
	f.Add([]byte(`[]`))
	snap := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		ri, err := ParseRepoInfo(data)
		if err != nil {
			return
		}
		if !IsCommit(ri.SHA) {
			t.Fatalf("accepted commit %q", ri.SHA)
		}
		for _, s := range ri.Siblings {
			p := filepath.Join(snap, filepath.FromSlash(s.Name))
			if rel, err := filepath.Rel(snap, p); err != nil || outside(rel) {
				t.Fatalf("file %q leaves the snapshot", s.Name)
			}
		}
		_, _ = Select(ri, "")
	})
}

// FuzzParseIndex: accepted shard names are distinct top-level .safetensors
// files.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":1},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../model.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"sub/x.safetensors"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := ParseIndex(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] || strings.ContainsAny(n, `/\`) || n == ".." || !strings.HasSuffix(n, ".safetensors") {
				t.Fatalf("accepted shard %q (of %q)", n, names)
			}
			seen[n] = true
		}
	})
}

// FuzzHeaders: the ETag and Content-Range readers never panic, and a
// normalized ETag has no quotes around it.
func FuzzHeaders(f *testing.F) {
	for _, s := range []string{`"abc"`, `W/"abc"`, "bytes 10-19/20", "bytes -1-2/3", "bytes */20", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if e := normalizeETag(s); strings.HasPrefix(e, `"`) || strings.HasSuffix(e, `"`) {
			t.Fatalf("normalizeETag(%q) = %q", s, e)
		}
		if n, ok := rangeStart(s); ok && n < 0 {
			t.Fatalf("rangeStart(%q) = %d", s, n)
		}
	})
}
