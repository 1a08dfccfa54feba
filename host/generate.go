package host

// docs/config.md is generated from the doc comments of Config and the
// types it holds; internal/configdoc's test fails while it is stale.
//go:generate go run ../internal/configdoc/cmd/configdoc -host . -o ../docs/config.md
