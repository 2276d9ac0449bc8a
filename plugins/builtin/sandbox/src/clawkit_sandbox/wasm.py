"""placeholder"""
def tools_for(agent):
    return []
def engine():
    import wasmtime
    return wasmtime.Engine()
