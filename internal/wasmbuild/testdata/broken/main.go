// Command broken does not compile; wasmbuild's test checks that the error
// carries the compiler's message.
package main

func main() {
	var x int = "not an int"
	_ = x
}
