package serverset

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"
)

// Endpoint is a host and port.
type Endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Member is the data of one serverset member znode.
type Member struct {
	ServiceEndpoint     Endpoint            `json:"serviceEndpoint"`
	AdditionalEndpoints map[string]Endpoint `json:"additionalEndpoints"`
	Status              string              `json:"status"`
	Shard               *int                `json:"shard,omitempty"`
}

// StatusAlive is the status of a registered member.
const StatusAlive = "ALIVE"

// Registration is one member of one service in one environment.
type Registration struct {
	Service string
	Env     string
	Member  Member
}

// Dir is the serverset directory of a registration under root.
func (r Registration) Dir(root string) string {
	return path.Join(root, r.Service, r.Env)
}

func (r Registration) validate() error {
	for _, part := range []string{r.Service, r.Env} {
		if part == "" || strings.Contains(part, "/") {
			return fmt.Errorf("invalid serverset name %q/%q", r.Service, r.Env)
		}
	}
	if r.Member.ServiceEndpoint.Host == "" || r.Member.ServiceEndpoint.Port <= 0 {
		return fmt.Errorf("invalid endpoint %+v", r.Member.ServiceEndpoint)
	}
	return nil
}

func (r Registration) data() ([]byte, error) {
	m := r.Member
	if m.Status == "" {
		m.Status = StatusAlive
	}
	if m.AdditionalEndpoints == nil {
		m.AdditionalEndpoints = map[string]Endpoint{}
	}
	return json.Marshal(m)
}

// ParseMember decodes a member znode's data.
func ParseMember(data []byte) (Member, error) {
	var m Member
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("invalid serverset member: %w", err)
	}
	return m, nil
}

// ReadDigest reads "user:password" digest credentials from a file ("" for
// no file: no ACL).
func ReadDigest(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("failed to read zookeeper credentials: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
