package app

import (
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// SetGlobalLoggers routes the process-wide loggers of client-go (klog: leader election, reflectors) and
// controller-runtime into log, so everything the process prints has one format and level.
func SetGlobalLoggers(log *slog.Logger) {
	l := logr.FromSlogHandler(log.Handler())
	klog.SetLogger(l)
	ctrllog.SetLogger(l)
}

// NewLogger builds the service's logger from the configured level and format.
func NewLogger(level, format string, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
