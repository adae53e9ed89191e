package sluicegin_test

// An example for go doc, compiled (not run: it needs a daemon). The README's whole apps are
// built and run by snippets_test.go.

import (
	"log"

	"github.com/gin-gonic/gin"

	sluice "github.com/sluice-rs/sluice/clients/go"
	sluicegin "github.com/sluice-rs/sluice/clients/go/gin"
)

func ExampleMiddleware() {
	c, err := sluice.NewClient(sluice.ClientOptions{Target: "/run/sluice/sluiced.sock"})
	if err != nil {
		log.Fatal(err)
	}
	r := gin.New()
	r.Use(sluicegin.Middleware(c, sluicegin.Options{Policy: "public"}))
	// per route or group: its own policy, cost, tier
	r.POST("/export", sluicegin.Middleware(c, sluicegin.Options{
		Policy:   "exports",
		Cost:     10,
		TierFunc: func(c *gin.Context) string { return c.GetString("plan") },
	}), func(c *gin.Context) { c.String(200, "ok") })
}
