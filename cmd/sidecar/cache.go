package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
)

// defaultCacheDir is -cache-dir's default: kvgate/wazero under the user's
// cache directory ($XDG_CACHE_HOME, else $HOME/.cache). Without either
// variable (a container started with no HOME) there is none, and err says so.
func defaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "kvgate", "wazero"), nil
}

// checkCacheDir makes dir and proves that files can be created in it, so
// that a read-only or foreign directory is found at start-up, before
// wazero tries to write compiled code there.
func checkCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".kvgate-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	return errors.Join(f.Close(), os.Remove(name))
}

// usableCacheDir is the compilation cache directory the sidecar uses: the
// -cache-dir flag's, or "" (in memory) when there is none or it cannot be
// used, which is a warning. A cache that cannot be used costs a compile
// per start, not the start.
func usableCacheDir(cfg *config, log *slog.Logger) string {
	switch {
	case cfg.CacheDir != "":
		if err := checkCacheDir(cfg.CacheDir); err != nil {
			log.Warn("-cache-dir cannot be used; the compiled filter is cached in memory only", "cache_dir", cfg.CacheDir, "err", err.Error())
			return ""
		}
	case cfg.NoDefaultCache != nil:
		log.Warn("no default -cache-dir; the compiled filter is cached in memory only", "err", cfg.NoDefaultCache.Error())
	}
	return cfg.CacheDir
}
