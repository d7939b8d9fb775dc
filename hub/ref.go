package hub

import (
	"fmt"
	"strings"
)

// DefaultRevision is the branch a reference without @REVISION names.
const DefaultRevision = "main"

// ParseRef splits "ORG/NAME[@REVISION]" into a repo id and a revision
// (DefaultRevision when absent). The revision may hold slashes
// ("refs/pr/1"); the repo id never holds "@".
func ParseRef(s string) (repo, rev string, err error) {
	repo, rev, hasRev := strings.Cut(s, "@")
	if err := CheckRepoID(repo); err != nil {
		return "", "", err
	}
	if !hasRev {
		return repo, DefaultRevision, nil
	}
	if err := CheckRevision(rev); err != nil {
		return "", "", err
	}
	return repo, rev, nil
}

// CheckRepoID accepts "ORG/NAME" as the hub spells repo ids: each part of
// letters, digits, '-', '_' and '.', starting and ending with a letter or
// digit, no "--" or ".." (the cache folder name joins the parts with "--"),
// at most 96 characters in all.
func CheckRepoID(id string) error {
	org, name, ok := strings.Cut(id, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not a repo id: want ORG/NAME", id)
	}
	if len(id) > 96 {
		return fmt.Errorf("repo id %q is longer than 96 characters", id)
	}
	for _, p := range []string{org, name} {
		if p == "" {
			return fmt.Errorf("%q is not a repo id: want ORG/NAME", id)
		}
		for i := 0; i < len(p); i++ {
			if !idChar(p[i]) {
				return fmt.Errorf("repo id %q holds %q: only letters, digits, '-', '_' and '.' are allowed", id, p[i])
			}
		}
		if !wordChar(p[0]) || !wordChar(p[len(p)-1]) {
			return fmt.Errorf("repo id %q: each part must start and end with a letter or digit", id)
		}
		if strings.Contains(p, "--") || strings.Contains(p, "..") {
			return fmt.Errorf("repo id %q must not contain \"--\" or \"..\"", id)
		}
	}
	return nil
}

func wordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func idChar(c byte) bool { return wordChar(c) || c == '-' || c == '.' }

// CheckRevision accepts a branch, tag or commit: it becomes a path under the
// cache's refs/ (as huggingface_hub writes it), so no empty, "." or ".."
// component, no leading or trailing slash, no backslash or control byte.
func CheckRevision(rev string) error {
	if rev == "" {
		return fmt.Errorf("empty revision after '@'")
	}
	if len(rev) > 255 {
		return fmt.Errorf("revision %.20q... is longer than 255 characters", rev)
	}
	for i := 0; i < len(rev); i++ {
		if c := rev[i]; c < 0x20 || c == 0x7f || c == '\\' || c == ':' {
			return fmt.Errorf("revision %q holds %q", rev, c)
		}
	}
	for _, part := range strings.Split(rev, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("revision %q is not a branch, tag or commit", rev)
		}
	}
	return nil
}

// IsCommit reports whether rev is a full commit hash (40 lowercase hex
// digits), which names a snapshot directly.
func IsCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	for i := 0; i < len(rev); i++ {
		if c := rev[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
