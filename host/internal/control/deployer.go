package control

import (
	"os"
	"os/user"
)

// Deployer names who publishes a manifest: user@host.
func Deployer() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
