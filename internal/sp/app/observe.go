package app

import (
	"context"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/leaderloop"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// hubObservation says whether the SP's view of the hub is current: lost once its API server has not answered a
// discovery for longer than staleAfter (the hub health check's threshold). Before the first answer nothing is
// served from the caches anyway (they are not synced).
func hubObservation(h *hub.Hub, staleAfter time.Duration) func() status.Observation {
	return func() status.Observation {
		reached := h.LastReached()
		if reached.IsZero() {
			return status.Observation{}
		}
		if age := time.Since(reached); age > staleAfter {
			return status.Observation{Lost: true, For: age}
		}
		return status.Observation{}
	}
}

// followObservation re-evaluates every cluster when the SP loses or regains its view of the hub, so the status
// events follow (UNAVAILABLE, then the observed status again): nothing on the hub changes to trigger it. A replica
// publishes only while it certainly leads, and its lease lives on the same hub: a leader cut off from the hub stops
// publishing once its lease runs out, so the UNAVAILABLE events go out only while the lease still holds (or without
// leader election); GET and LIST say UNAVAILABLE regardless, and the health document's hub check is unhealthy.
func (a *App) followObservation(ctx context.Context) {
	observed := a.Service.Settings().Observed
	lost := false
	leaderloop.Every(a.observeEvery, func(context.Context) {
		o := observed()
		if o.Lost == lost {
			return
		}
		lost = o.Lost
		if lost {
			a.log.Warn("the hub's API server has not answered: clusters are reported UNAVAILABLE until it does", "for", o.For.Round(time.Second).String())
		} else {
			a.log.Info("the hub's API server answers again: clusters are reported as observed")
		}
		a.Reconciler.EnqueueAll()
	})(ctx)
}
