//go:build !unix

package main

import "os"

// termWidth is the terminal's width in columns, or 0 when unknown (then 80
// is assumed).
func termWidth(*os.File) int { return 0 }
