module example.invalid/kws/gang-go

go 1.24

require example.invalid/kws/sdk-go v0.0.0

replace example.invalid/kws/sdk-go => ../sdk-go
