print("blekit")
