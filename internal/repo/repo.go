// Package repo finds the root of the kvgate repository from the working
// directory, so that generators, tests and the release tool (in this module
// and in deploy/) can read and write files by their repository paths.
package repo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
)

// mainModule is the first line of the repository root's go.mod.
var mainModule = []byte("module github.com/kvgate/kvgate\n")

// Root returns the repository root: the nearest directory at or above the
// working directory whose go.mod declares the main module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, mainModule) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repo: no go.mod of github.com/kvgate/kvgate at or above the working directory")
		}
		dir = parent
	}
}

// Path returns the absolute path of a slash-separated repository path.
func Path(rel string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}
