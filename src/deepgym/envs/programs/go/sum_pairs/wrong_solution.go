package main

import (
	"bufio"
	"fmt"
	"os"
)

// Wrong: int32 cannot hold values past 2^31.
func main() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var n int32
	fmt.Fscan(in, &n)
	for i := int32(0); i < n; i++ {
		var a, b int32
		fmt.Fscan(in, &a, &b)
		fmt.Fprintln(out, a+b)
	}
}
