// Command gen writes Envoy's stats_tags from the metric table into every
// file of statstags.Files; go generate runs it (package statstags).
package main

import (
	"fmt"
	"os"

	"github.com/kvgate/kvgate/internal/repo"
	"github.com/kvgate/kvgate/internal/statstags"
)

func main() {
	root, err := repo.Root()
	if err == nil {
		var changed []string
		changed, err = statstags.Generate(root)
		for _, p := range changed {
			fmt.Println("statstags: wrote", p)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "statstags:", err)
		os.Exit(1)
	}
}
