// Package lint holds project policy written as tests (lint_test.go), run
// by `go test ./internal/lint/`: rules a reviewer would otherwise have to
// remember, such as which packages abi/ and sdk/ may import (lint_test.go,
// host_test.go), and that git tracks no build output but fixtures rebuilt
// from their sources and compared byte for byte (artifacts_test.go), and
// that a package's file map in its doc.go names its files (filemap_test.go).
package lint
