// Command junkplugin is not a loom plugin: it prints a line on standard output where the
// handshake belongs and waits, as a plugin that prints before serving would.
package main

import (
	"fmt"
	"time"
)

func main() {
	fmt.Println("hello, I print before the handshake")
	time.Sleep(time.Minute)
}
