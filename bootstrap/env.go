package bootstrap

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/trellis-dev/trellis/bootstrap/internal/kopsenv"
)

// CacheDir is where Trellis keeps what it builds or pins: kops channels,
// offline asset hashes, Kubernetes binaries. TRELLIS_CACHE overrides it.
func CacheDir() string {
	if d := os.Getenv("TRELLIS_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "trellis")
	}
	return filepath.Join(os.TempDir(), "trellis-cache")
}

// Env configures kops as a library.
type Env struct {
	// CacheDir defaults to CacheDir().
	CacheDir string
	// OfflineAssets makes kops read artifact hashes from a local folder
	// instead of the kops release site. Only for plans against the fake
	// cloud or an emulator: the hashes are of placeholders, which no real
	// instance could boot.
	OfflineAssets bool
	// Emulator is the URL of an AWS API emulator on loopback (moto_server,
	// see internal/awsemu). Every AWS call and the s3:// state store go there, in
	// Region, with offline kops assets. Never set implicitly: only the
	// --aws-emulator flag or TRELLIS_AWS_EMULATOR select it.
	Emulator string
	Region   string
}

// EmulatorEnv is the environment variable behind --aws-emulator.
const EmulatorEnv = "TRELLIS_AWS_EMULATOR"

// CheckEmulator validates an emulator URL without applying it.
func CheckEmulator(url string) error {
	_, err := kopsenv.CheckEmulatorURL(url)
	return err
}

// Setup applies the environment. It is process-wide, as kops's settings are.
func (e Env) Setup() error {
	dir := e.CacheDir
	if dir == "" {
		dir = CacheDir()
	}
	if err := kopsenv.Setup(dir); err != nil {
		return fmt.Errorf("failed to set up kops: %w", err)
	}
	if e.Emulator != "" {
		if err := kopsenv.UseEmulator(e.Emulator, e.Region); err != nil {
			return err
		}
	}
	if e.OfflineAssets || e.Emulator != "" {
		if err := kopsenv.UseOfflineAssets(dir); err != nil {
			return fmt.Errorf("failed to set up offline kops assets: %w", err)
		}
	}
	return nil
}
