package compose

import (
	"bytes"
	"encoding/json"
)

// jsonDecoder refuses members the target does not have, so a misspelled
// key in a mounted configuration fails the test.
func jsonDecoder(b []byte) *json.Decoder {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d
}
