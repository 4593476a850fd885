# Call 2: load the CSV with pandas; `df` stays in the kernel for later calls.
import pandas as pd
df = pd.read_csv("sales.csv")
df["revenue"] = df["units"] * df["price"]
print(df.shape)
df.head(3)
