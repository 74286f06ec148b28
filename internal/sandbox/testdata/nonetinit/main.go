// Command nonetinit makes a sandbox with Egress without calling
// netinit.Run first, as a binary wrongly wired would, and prints what New
// said. It parses no options: the marker alone cannot stop it.
package main

import (
	"fmt"
	"os"

	"github.com/countbot/toolsvc/internal/sandbox"
)

func main() {
	s, err := sandbox.New(sandbox.Options{Mode: sandbox.None, Workspace: os.Args[len(os.Args)-1], Egress: true})
	if err != nil {
		fmt.Println("REFUSED:", err)
		return
	}
	s.Close()
	fmt.Println("MADE")
}
