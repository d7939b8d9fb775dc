package mlx

import (
	"os"
	"os/exec"
	"reflect"
	"testing"
)

// TestDirectBindingsUpToDate regenerates direct.go and compares: a new
// signature in the symbol table must get its SyscallN binding, or every call
// to it pays for purego.RegisterFunc's reflection.
func TestDirectBindingsUpToDate(t *testing.T) {
	want, err := os.ReadFile("direct.go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/gendirect", "-out", dir+"/direct.go")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gendirect: %v\n%s", err, out)
	}
	got, err := os.ReadFile(dir + "/direct.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("mlx/direct.go is stale: run go generate ./mlx")
	}
}

// TestHotSymbolsBindDirectly checks that only the two functions returning a
// string (last error, version: never on a hot path) take purego's
// reflection path; everything else is called through SyscallN.
func TestHotSymbolsBindDirectly(t *testing.T) {
	for _, s := range symbols() {
		ty := reflect.TypeOf(s.ptr).Elem()
		slow := ty.NumOut() == 1 && ty.Out(0).Kind() == reflect.String
		// A fresh variable of the same type, bound to a dummy address:
		// bindDirect only builds the closure, it never calls it.
		v := reflect.New(ty)
		if got := bindDirect(v.Interface(), 1); got == slow {
			t.Errorf("%s (%v): bound directly = %v, want %v", s.name, ty, got, !slow)
		}
	}
}
