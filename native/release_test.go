package native

import (
	"runtime"
	"testing"
)

// The digest baked into the binary must be the digest of the pack this tree
// builds: the pack is reproducible, so a shim change that was not followed by
// `make pack` (and a commit of release_digests.go) shows up here, not as a
// refused download on a user's machine.
func TestReleaseDigestMatchesBuiltPack(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the built pack is linux-amd64-cpu")
	}
	_, _, built := realTarball(t)
	baked, ok := ReleaseDigest(PackVersion, "linux-amd64-cpu")
	if !ok {
		t.Fatalf("no release digest baked in for %s/linux-amd64-cpu: run `make pack` and commit native/release_digests.go", PackVersion)
	}
	if baked != built {
		t.Fatalf("baked release digest %s (%d bytes) is not the built pack's %s (%d bytes): run `make pack` and commit native/release_digests.go",
			baked.SHA256, baked.Size, built.SHA256, built.Size)
	}
}
