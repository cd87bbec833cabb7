module example.invalid/kws/sdk-go

go 1.24
