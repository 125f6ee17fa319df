// Package metric builds the Prometheus collectors the domains export, one
// call a metric: its name, its help and its labels. Registering them stays
// with each domain, which knows whether it has a registry.
package metric

import "github.com/prometheus/client_golang/prometheus"

// Counter is a counter without labels.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec is a counter by the labels named.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge is a gauge without labels.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}
