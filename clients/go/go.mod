module github.com/sluice-rs/sluice/clients/go

// The root package needs only the standard library; the gin adapter is the nested module
// ./gin, so a net/http user builds nothing of gin.
go 1.19
