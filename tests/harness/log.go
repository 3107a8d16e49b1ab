package harness

import (
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// UseTestLogger sends the components' logs to stderr when TUNA_TEST_LOG is
// set, and discards them otherwise, so test output stays readable.
func UseTestLogger() {
	if os.Getenv("TUNA_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
		return
	}
	ctrl.SetLogger(logr.Discard())
}
