module github.com/mlxgo/mlxgo

go 1.26
