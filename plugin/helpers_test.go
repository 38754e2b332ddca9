package plugin

import "encoding/json"

// ParseNetConfAny returns the ipam type of any JSON netconf.
func ParseNetConfAny(b []byte) (string, error) {
	var v struct {
		IPAM struct {
			Type string `json:"type"`
		} `json:"ipam"`
	}
	err := json.Unmarshal(b, &v)
	return v.IPAM.Type, err
}
