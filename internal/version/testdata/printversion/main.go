// Command printversion prints version.Get().Version, for the linker flag test.
package main

import (
	"fmt"

	"github.com/kvgate/kvgate/internal/version"
)

func main() { fmt.Print(version.Get().Version) }
