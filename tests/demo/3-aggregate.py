# Call 3: aggregate, using the `df` loaded by call 2.
by_region = df.groupby("region")["revenue"].sum().round(2).sort_values(ascending=False)
print("total revenue:", round(df["revenue"].sum(), 2))
by_region
