package main

import (
	"bufio"
	"os"
	"strconv"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	in.Split(bufio.ScanWords)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	next := func() int64 {
		in.Scan()
		v, err := strconv.ParseInt(in.Text(), 10, 64)
		if err != nil {
			panic(err)
		}
		return v
	}
	if !in.Scan() {
		return
	}
	n, err := strconv.Atoi(in.Text())
	if err != nil {
		panic(err)
	}
	for i := 0; i < n; i++ {
		a := next()
		b := next()
		out.WriteString(strconv.FormatInt(a+b, 10))
		out.WriteByte('\n')
	}
}
