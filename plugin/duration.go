package plugin

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration reads "90s"-style strings or a plain number of seconds, the two
// forms operators write in CNI configs.
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		*d = Duration(time.Duration(x * float64(time.Second)))
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration like \"90s\" or a number of seconds", x)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("duration %s: want a Go duration like \"90s\" or a number of seconds", b)
	}
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
