package node

import (
	"fmt"
	"os"
	"testing"
)

// KeepLogsEnv, set to anything, keeps the logs of a suite run that passed
// too.
const KeepLogsEnv = "TUNA_NODE_KEEP_LOGS"

// RunSuite runs a node suite (the package's TestMain): setUp with a new
// folder for the run's logs (components, edge, pods), the tests, then
// tearDown, also after a failed set-up. The folder is removed after a run
// that passed unless KeepLogsEnv is set; otherwise its path is printed, for
// whoever reads the failure. name prefixes what the suite prints. It
// returns the code for os.Exit.
func RunSuite(m *testing.M, name string, setUp func(dir string) error, tearDown func()) int {
	dir, err := os.MkdirTemp("", "tuna-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := 1
	defer func() {
		if code == 0 && os.Getenv(KeepLogsEnv) == "" {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "%s: the logs (components, edge) are in %s\n", name, dir)
		}
	}()
	if err := setUp(dir); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		tearDown()
		return code
	}
	code = m.Run()
	tearDown()
	return code
}
