// Package lint holds project policy written as tests (lint_test.go), run
// by `go test ./internal/lint/`: rules a reviewer would otherwise have to
// remember, such as which packages abi/ and sdk/ may import.
package lint
