// Package depcheck has no code: its tests keep the module's dependency
// graph as designed (no production package links the testing package).
package depcheck
