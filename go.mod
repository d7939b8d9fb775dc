module github.com/mlxgo/mlxgo

go 1.26

require (
	github.com/ebitengine/purego v0.11.3
	github.com/klauspost/cpuid/v2 v2.4.2
	github.com/rogpeppe/go-internal v1.16.0
)

require (
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
